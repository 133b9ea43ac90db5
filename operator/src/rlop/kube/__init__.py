"""Thin Kubernetes API adapter."""
