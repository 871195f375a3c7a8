-- nodereg schema, version 10: what a buyer compares besides speed (issue 20).
-- Prices of nodes with their history: one row per price seen (`nodereg nodes set --price-per-hour`,
-- `nodereg import prices FILE.csv`); a node's price is its latest row by date, then by entry. The
-- capacity of a trace: the traced tree's peak resident memory and its disk and network volume,
-- where they were measured (NULL: not known). Portable SQL: DuckDB and PostgreSQL.
CREATE SEQUENCE node_prices_id_seq
;
CREATE TABLE node_prices (
    price_id        BIGINT PRIMARY KEY DEFAULT nextval('node_prices_id_seq'),
    uid             VARCHAR NOT NULL UNIQUE,
    node_id         BIGINT NOT NULL,           -- -> nodes.node_id
    price_per_hour  DOUBLE PRECISION NOT NULL, -- >= 0, in `currency`
    currency        VARCHAR NOT NULL,          -- ISO 4217 code, upper case (USD, EUR, CNY)
    source          VARCHAR,                   -- where the price came from (a price list, a quote, cli)
    valid_from      DATE NOT NULL,             -- the date the price was seen or takes effect
    created_at      TIMESTAMP NOT NULL
)
;
ALTER TABLE traces ADD COLUMN peak_rss_bytes BIGINT   -- the traced tree's peak resident memory
;
ALTER TABLE traces ADD COLUMN read_bytes BIGINT       -- bytes read by the tree (disk and files)
;
ALTER TABLE traces ADD COLUMN write_bytes BIGINT
;
ALTER TABLE traces ADD COLUMN net_bytes BIGINT        -- network bytes received + sent (node-wide, where known)
;
CREATE VIEW v_node_prices AS
SELECT n.name AS node, p.price_per_hour, p.currency, p.source, p.valid_from, p.created_at,
       p.price_id = (SELECT q.price_id FROM node_prices q WHERE q.node_id = p.node_id
                     ORDER BY q.valid_from DESC, q.price_id DESC LIMIT 1) AS current
FROM node_prices p JOIN nodes n ON n.node_id = p.node_id
