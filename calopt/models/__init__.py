"""Fitted models and calopt's file format."""
