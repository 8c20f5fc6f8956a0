"""The ``gpupaas`` command-line client of the REST API."""
