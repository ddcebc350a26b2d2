-- Files read (pages entering the page cache) by at least ${min_share} of the traces:
-- in how many traces, that share, and the mean pages read per trace that read it.
WITH fleet AS (
  SELECT COUNT(*) AS traces FROM traces
),
file_reads AS (
  SELECT u.trace_id, f.path, SUM(u.pages) AS pages
  FROM page_use AS u
  JOIN file AS f ON f.trace_id = u.trace_id AND f.file_id = u.file_id
  WHERE f.path IS NOT NULL
  GROUP BY u.trace_id, f.path
)
SELECT
  r.path,
  COUNT(*) AS traces,
  ROUND(COUNT(*) / MAX(fleet.traces), 3) AS share,
  ROUND(AVG(r.pages), 1) AS mean_pages
FROM file_reads AS r
CROSS JOIN fleet
GROUP BY r.path
HAVING COUNT(*) >= ${min_share} * MAX(fleet.traces)
ORDER BY traces DESC, r.path
