"""Helpers shared by the test folders (unit, app, integration, browser)."""
