-- Files read (pages entering the page cache) by at least ${min_share} of the traces:
-- in how many traces, that share, and the mean pages read per trace that read it.
-- path_read holds, per trace and path, the pages of page_use of the trace's files of that path.
WITH fleet AS (
  SELECT COUNT(*) AS traces FROM traces
)
SELECT
  r.path,
  COUNT(*) AS traces,
  ROUND(COUNT(*) / MAX(fleet.traces), 3) AS share,
  ROUND(AVG(r.pages), 1) AS mean_pages
FROM path_read AS r
CROSS JOIN fleet
GROUP BY r.path
HAVING COUNT(*) >= ${min_share} * MAX(fleet.traces)
ORDER BY traces DESC, r.path
