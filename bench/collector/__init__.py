"""The flow collector's decoder: message builders shared by its benchmark and its tests."""
