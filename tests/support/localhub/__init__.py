"""TEST SCAFFOLDING: a local Hugging Face Hub (server.py) and the repos it serves (repos.py).

Tiny random-weight models and synthetic datasets under the real ids the docs and task YAMLs
name, so that the front door (``from_pretrained("org/name")``, ``load_dataset("org/name")``,
the README's commands) runs offline through the clients' own download code. Never a claim
about the real models or data. How to start it: :mod:`tests.support.localhub.server`.
"""
