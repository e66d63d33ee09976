"""Measuring the hardware and the model: layer profiles, communication profiles, calibration."""
