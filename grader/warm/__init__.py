"""Warm workers: the zygote inside the sandbox, its wire messages, the pool of kernels forked from
it, the nbgrader fork server, workers kept between runs."""
