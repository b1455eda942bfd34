# /etc/profile.d/r2ac.sh in the r2ac image: login shells (the SSH sessions of Ray's cluster launcher,
# deploy/local-cluster.yaml) get the environment the image's ENV gives its containers.
export VIRTUAL_ENV=/opt/venv
export PATH="/opt/venv/bin:$PATH"
export R2AC_HOME=/opt/r2ac
export RAY_USAGE_STATS_ENABLED=0
export WANDB_MODE="${WANDB_MODE:-offline}"
export PYTHONUNBUFFERED=1
