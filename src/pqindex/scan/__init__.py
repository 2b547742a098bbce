"""Executing a read plan: fetch byte ranges, decode chosen pages."""
