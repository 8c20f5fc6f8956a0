"""Deployment files; the Python development tools live in deploy.devtools."""
