"""``python -m ampkit.classroom.hub.users add|remove|list``: the isolated hub's learner accounts (``make hub-users``,
``make hub-users-remove``; hub/README.md "Isolation"), made before the day instead of at each first login. The
accounts themselves are :mod:`ampkit.classroom.isolation`'s; this command adds the hub's settings and first-login
copy to them. Standard library only.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ampkit._kit import ROOT
from ampkit.classroom import isolation
from ampkit.classroom.hub import copy_notebooks_once, select_lab_language
from ampkit.classroom.hub.settings import settings_from_env

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m ampkit.classroom.hub.users add NAME...`` (create, copy the notebooks, own the home),
    ``remove [NAME...]`` (every kit account when no name; homes stay), ``list``."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m ampkit.classroom.hub.users", description=main.__doc__)
    p.add_argument("command", choices=("add", "remove", "list"))
    p.add_argument("names", nargs="*")
    a = p.parse_args(argv)
    names = [n for arg in a.names for n in arg.replace(",", " ").split()]
    try:
        if a.command == "list":
            for name, entry in sorted(isolation.kit_users().items()):
                print(f"{name}\t{entry.pw_name}\tuid {entry.pw_uid}\t{entry.pw_dir}")
            return 0
        if os.geteuid() != 0:
            raise ValueError("creating and removing system users needs root: sudo make ...")
        if a.command == "remove":
            removed = isolation.remove_users(names or None)
            print(f"removed {len(removed)} account(s): {', '.join(removed) or 'none'}; their homes stay")
            return 0
        if not names:
            raise ValueError("name the learners: make hub-users NAMES=ana-k,bo-l")
        s = settings_from_env(dict(os.environ), ROOT)
        isolation.make_private(s.state_dir)
        reference = Path(s.repo) / "docs" / "reference.md"
        for name in names:
            home = Path(s.users_dir) / name
            def first_copy(home=home) -> None:
                select_lab_language(home, s.lang)
                copy_notebooks_once(s.notebook_source, home, reference, s.learner_notebooks)

            entry = isolation.prepare_learner(name, home, first_copy)
            print(f"{name}: system user {entry.pw_name} (uid {entry.pw_uid}), home {home} (mode 700)")
    except (ValueError, RuntimeError) as exc:
        print(f"hub users: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
