"""`nodereg serve`: the registry as a read-only web site (registry/web/, docs/web.md)."""

import typer

from registry.cli.app import app, state
from registry.cli.output import say
from registry.errors import UserError


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default; behind a "
                                                         "reverse proxy for others: docs/web.md)."),
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="Port to listen on."),
    root_path: str = typer.Option("", "--root-path", help="The path prefix a reverse proxy serves the site under "
                                                          "(e.g. /nodereg)."),
    lock_wait: float = typer.Option(1.0, "--lock-wait", min=0, metavar="SECONDS",
                                    help="DuckDB: how long a request waits for a writer before answering "
                                         "from its last snapshot."),
) -> None:
    """Serve the registry as a read-only web site: node types, comparisons, predictions, SQL, a JSON API."""
    import socket

    import uvicorn

    from registry.web.app import create_app

    web = create_app(state(ctx).db_url, lock_wait_s=lock_wait)
    # bound here, not by uvicorn: a port in use is one `error:` line, not a log record and exit 3
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        raise UserError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    say(f"serving {web.state.source.display_url} read-only at http://{shown}:{port}{root_path}/ "
        "(Ctrl-C stops)", err=True)
    config = uvicorn.Config(web, log_level="warning", proxy_headers=True, server_header=False, root_path=root_path)
    uvicorn.Server(config).run(sockets=[sock])
