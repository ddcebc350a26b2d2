-- Pages read by at least ${min_share} of the traces, as runs of consecutive pages of a
-- file (in pages of the trace's page size): the pages a fleet's prefetch plan would hold.
-- path_read_run holds each trace's pages of each path once, as runs; a run adds one trace
-- from its first page to its end, so a running sum over the runs' edges in page order
-- counts the traces of every stretch of pages without expanding runs into pages.
WITH fleet AS (
  SELECT COUNT(*) AS traces FROM traces
),
edges AS (
  SELECT path, first_page AS page, 1 AS delta FROM path_read_run
  UNION ALL
  SELECT path, first_page + pages AS page, -1 AS delta FROM path_read_run
),
steps AS (
  SELECT path, page, SUM(delta) AS delta FROM edges GROUP BY path, page
),
stretches AS (
  SELECT
    path,
    page AS first_page,
    LEAD(page) OVER (PARTITION BY path ORDER BY page) AS end_page,
    SUM(delta) OVER (PARTITION BY path ORDER BY page ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS traces
  FROM steps
),
common AS (
  SELECT path, first_page, end_page, traces
  FROM stretches
  WHERE end_page IS NOT NULL AND traces > 0
    AND traces >= ${min_share} * (SELECT MAX(traces) FROM fleet)
),
starts AS (
  SELECT path, first_page, end_page, traces,
    CASE WHEN first_page = LAG(end_page) OVER (PARTITION BY path ORDER BY first_page) THEN 0 ELSE 1 END AS new_run
  FROM common
),
runs AS (
  SELECT path, first_page, end_page, traces,
    SUM(new_run) OVER (PARTITION BY path ORDER BY first_page ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS run
  FROM starts
)
SELECT path, MIN(first_page) AS first_page, SUM(end_page - first_page) AS pages, MIN(traces) AS min_traces, MAX(traces) AS max_traces
FROM runs
GROUP BY path, run
ORDER BY path, first_page
