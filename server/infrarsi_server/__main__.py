"""``python -m infrarsi_server``: the language server over stdio (what the VS Code extension starts)."""

from infrarsi_server.main import main

main()
