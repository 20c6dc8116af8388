"""What nbgrader loads in its own process (nbgrader_config.py names them): preprocessors, kernel
managers, the observation of the kernel, nbgrader's entry point."""
