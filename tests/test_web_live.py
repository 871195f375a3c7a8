"""`nodereg serve` beside writers on the same DuckDB file: `nodereg import` and `nodereg profile` run
to completion while a client keeps loading pages, every page is answered, and the new data shows
once the writers are done."""

import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from web_data import build
from web_server import free_port

PAGES = ["/", "/nodes", "/node?name=alpha", "/predictions?app=solver", "/apps", "/nodes?sort=-memory_gbs"]


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_profile_and_import_complete_while_the_site_serves(tmp_path, binary):
    url = f"duckdb:///{tmp_path / 'registry.duckdb'}"
    build(url)
    port = free_port()
    nodereg = [sys.executable, "-m", "registry", "--db", url]
    server = subprocess.Popen(nodereg + ["serve", "--port", str(port)], stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "NODEREG_BUILD_CACHE": os.environ["NODEREG_BUILD_CACHE"]})
    base = f"http://127.0.0.1:{port}"
    try:
        assert server.stderr.readline().startswith(f"serving {tmp_path / 'registry.duckdb'} read-only at {base}/")
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch(base + "/")
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
        for page in PAGES:                     # each page seen once: a snapshot to fall back on
            assert fetch(base + page)[0] == 200
        answers, stop = [], threading.Event()

        def browse():
            while not stop.is_set():
                for page in PAGES:
                    status, body = fetch(base + page)
                    answers.append((status, "A writer holds the registry" in body))
                    time.sleep(0.02)
        client = threading.Thread(target=browse)
        client.start()
        (tmp_path / "runs.csv").write_text("app,node,threads,time_s\nsolver,alpha,4,58.5\nsolver,alpha,4,59.1\n")
        try:
            imported = subprocess.run(nodereg + ["--wait", "120", "import", "runs", str(tmp_path / "runs.csv")],
                                      capture_output=True, text=True, timeout=300)
            profiled = subprocess.run(nodereg + ["--wait", "120", "profile", "live-node", "--cpus",
                                                 str(min(os.sched_getaffinity(0))), "--quick", "--reps", "2",
                                                 "--kernels", "triad,peak_fma"],
                                      capture_output=True, text=True, timeout=600)
        finally:
            stop.set()
            client.join(60)
        assert imported.returncode == 0, imported.stderr
        assert profiled.returncode == 0, profiled.stderr
        assert len(answers) >= 20 and {status for status, _ in answers} == {200}, answers[:20]
        status, page = fetch(base + "/nodes?per=500")
        assert status == 200 and "live-node" in page and "A writer holds the registry" not in page
        status, page = fetch(base + "/node?name=live-node")
        assert status == 200 and 'id="fig-roofline"' in page
        assert ">2</td>" in fetch(base + "/node?name=alpha")[1]     # the imported runs, on alpha's page
    finally:
        server.terminate()
        server.wait(30)
