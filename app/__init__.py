"""XEngine Studio's Qt layer: a thin view over the headless core in ``solver/``."""
