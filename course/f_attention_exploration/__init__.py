"""Assignment F (attention exploration): checks, and the experiments it draws."""
