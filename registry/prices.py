"""Node prices, kept with their history: `nodereg nodes set --price-per-hour`, `nodereg import prices`.

Every price seen is one row of `node_prices` (node, price per hour, currency, source, date); a
node's price is its latest row by date, then by entry, so an old price list imported after a newer
one does not override it. The same price of the same node, currency, source and date is stored
once (its uid is derived from them), so importing a file twice adds nothing. A file is imported
whole or not at all: the first bad line (an unknown node, a price that is negative or missing, a
currency that is not a 3-letter code, a date that is not YYYY-MM-DD) is one error naming it.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from registry.db.statement import execute
from registry.db.time import utcnow
from registry.db.write import insert_if_absent
from registry.errors import UserError
from registry.io.csvrows import read_records
from registry.nodes import find_node_id, require_node_id

if TYPE_CHECKING:
    import sqlalchemy as sa

CSV_COLUMNS = ("node", "price_per_hour", "currency")
CSV_OPTIONAL = ("source", "date")
_CURRENCY = re.compile(r"[A-Za-z]{3}")
_DECIMAL = re.compile(r"\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_UID_SPACE = uuid.UUID("6f1c4f0e-8a7e-4d55-9a43-2b1e0c5d9a20")


@dataclass(frozen=True)
class Price:
    node: str
    price_per_hour: float
    currency: str
    source: str | None = None
    valid_from: dt.date | None = None


def check_price(text) -> float:
    """A price per hour >= 0 from its text (plain ASCII notation; negative, missing or not a number: an error)."""
    text = str(text).strip()
    if not text:
        raise UserError("the price per hour is missing")
    value = float(text) if _DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(value):
        raise UserError(f"the price per hour must be a number >= 0, got {text!r}")
    return value


def check_currency(text: str) -> str:
    text = str(text).strip()
    if not _CURRENCY.fullmatch(text):
        raise UserError(f"the currency must be a 3-letter code such as USD, got {text!r}")
    return text.upper()


def check_date(text: str | None) -> dt.date | None:
    text = str(text or "").strip()
    if not text:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UserError(f"the date must be YYYY-MM-DD, got {text!r}") from None


def store_price(conn: sa.Connection, price: Price) -> bool:
    """Store one price of an existing node; False when that very price was stored already."""
    node_id = require_node_id(conn, price.node)
    day = price.valid_from or utcnow().date()
    key = f"{price.node}\x1f{price.price_per_hour!r}\x1f{price.currency}\x1f{price.source or ''}\x1f{day.isoformat()}"
    row = {"node_id": node_id, "price_per_hour": price.price_per_hour, "currency": price.currency,
           "source": price.source, "valid_from": day, "created_at": utcnow()}
    return insert_if_absent(conn, "node_prices", {"uid": str(uuid.uuid5(_UID_SPACE, key))}, row, "price_id")[1]


def read_prices_csv(conn: sa.Connection, path: Path) -> list[Price]:
    """Every row of a prices CSV (node,price_per_hour,currency[,source,date]), checked against the
    registry's nodes; the first problem is one UserError naming the file and line."""
    def parse(record: dict[str, str]) -> Price:
        node = record["node"]
        if not node:
            raise UserError("the node is missing")
        if find_node_id(conn, node) is None:
            raise UserError(f"unknown node {node!r} (register it first: `nodereg nodes`)")
        return Price(node, check_price(record["price_per_hour"]), check_currency(record["currency"]),
                     record["source"] or path.name, check_date(record["date"]))

    return read_records(path, CSV_COLUMNS, parse, what="prices", optional=CSV_OPTIONAL)


def import_prices_csv(conn: sa.Connection, path: Path) -> tuple[int, int]:
    """(rows read, prices new to the registry), inside the caller's transaction."""
    prices = read_prices_csv(conn, Path(path))
    return len(prices), sum(store_price(conn, p) for p in prices)


def current_prices(conn: sa.Connection) -> dict[str, tuple[float, str]]:
    """node -> (price per hour, currency): each priced node's latest price."""
    rows = execute(conn, "SELECT node, price_per_hour, currency FROM v_node_prices WHERE current")
    return {r[0]: (float(r[1]), r[2]) for r in rows}
