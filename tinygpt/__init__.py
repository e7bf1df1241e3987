"""TinyGPT: the site build and the numpy reference model."""
