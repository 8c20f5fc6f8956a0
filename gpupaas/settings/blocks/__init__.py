"""The settings blocks, one per integration or concern; ``gpupaas.settings.base`` names every
setting of each, and the environments (dev, test, production) start from base."""
