"""Examples tier (marker ``examples``): what the README, the notebook, the
Airflow DAG and the Docker Compose file ship, run as a user would."""
