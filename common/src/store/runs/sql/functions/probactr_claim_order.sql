-- probactr_claim_order: current body (first defined in 2026112503000001_routing.sql).
--
-- The claim's sort key of a live run: `available_at` moved earlier by one minute per point
-- of priority. A higher priority goes first among runs queued within that many minutes of
-- each other, and a lower one that waited longer goes first anyway (aging: no priority
-- starves another forever). With every priority 0 the order is `available_at`, then id.
CREATE OR REPLACE FUNCTION probactr_claim_order(available_at TIMESTAMPTZ, priority INTEGER)
RETURNS TIMESTAMPTZ LANGUAGE sql STABLE AS $$
    SELECT available_at - make_interval(secs => priority * 60)
$$;
