"""Devices: SoCs and execution choices, profiles, battery and energy accounting, runtime policies."""
