"""The REST API: DRF views, serializers, authentication, rate limits and URLs (an edge)."""
