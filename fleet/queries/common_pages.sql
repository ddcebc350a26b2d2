-- Pages read by at least ${min_share} of the traces, as runs of consecutive pages of a
-- file (in pages of the trace's page size): the pages a fleet's prefetch plan would hold.
-- page_use runs never cross a 256-page boundary, so 256 offsets expand any of them.
WITH fleet AS (
  SELECT COUNT(*) AS traces FROM traces
),
digits AS (
  SELECT d FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15)) AS v(d)
),
offsets AS (
  SELECT hi.d * 16 + lo.d AS k FROM digits AS hi CROSS JOIN digits AS lo
),
pages AS (
  SELECT DISTINCT u.trace_id, f.path, u.first_page + o.k AS page
  FROM page_use AS u
  JOIN file AS f ON f.trace_id = u.trace_id AND f.file_id = u.file_id
  JOIN offsets AS o ON o.k < u.pages
  WHERE f.path IS NOT NULL
),
common AS (
  SELECT p.path, p.page, COUNT(*) AS traces
  FROM pages AS p
  GROUP BY p.path, p.page
  HAVING COUNT(*) >= ${min_share} * (SELECT MAX(traces) FROM fleet)
),
runs AS (
  SELECT path, page, traces, page - ROW_NUMBER() OVER (PARTITION BY path ORDER BY page) AS run
  FROM common
)
SELECT path, MIN(page) AS first_page, COUNT(*) AS pages, MIN(traces) AS min_traces, MAX(traces) AS max_traces
FROM runs
GROUP BY path, run
ORDER BY path, first_page
