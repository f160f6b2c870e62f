"""The PaddlePaddle engine, one folder: ``api`` (the kind's models), ``framework`` (its
planner), ``local`` (what it needs on one machine), ``entry`` (its registry record).
Importing the package loads none of them."""
