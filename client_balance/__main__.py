"""``python -m client_balance`` runs the ``client-balance`` command."""

from client_balance.cli import run

run()
