"""The XGBoost engine, one folder: ``api`` (the kind's models), ``framework`` (its planner),
``entry`` (its registry record). Importing the package loads none of them."""
