"""Static tests of the deployment files: docker-compose.yml, the Dockerfile, deploy/ (no Docker engine)."""
