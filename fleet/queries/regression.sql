-- What build ${build_b} added to the critical path compared with build ${build_a}: per
-- process (by name) and kind of segment, and per file waited for, the mean time per
-- trace on each build's critical paths, most added first. Only additions are listed
-- (at least 0.01 ms as shown). critical_path_by_process and critical_path_by_file hold
-- each trace's critical path summed per process and kind, and per file; filtering them on
-- build reads only the two builds' folders.
WITH sides AS (
  SELECT trace_id, CASE WHEN build = ${build_a} THEN 'a' ELSE 'b' END AS side
  FROM traces
  WHERE build IN (${build_a}, ${build_b})
),
sizes AS (
  SELECT side, COUNT(*) AS traces FROM sides GROUP BY side
),
on_path AS (
  SELECT 'process' AS what, c.comm AS name, c.kind AS kind, s.side, SUM(c.duration_ns) AS ns
  FROM critical_path_by_process AS c
  JOIN sides AS s ON s.trace_id = c.trace_id
  WHERE c.build IN (${build_a}, ${build_b})
  GROUP BY c.comm, c.kind, s.side
  UNION ALL
  SELECT 'file' AS what, COALESCE(f.path, '(unresolved)') AS name, 'io_wait' AS kind, s.side, SUM(f.wait_ns) AS ns
  FROM critical_path_by_file AS f
  JOIN sides AS s ON s.trace_id = f.trace_id
  WHERE f.build IN (${build_a}, ${build_b})
  GROUP BY COALESCE(f.path, '(unresolved)'), s.side
),
means AS (
  SELECT p.what, p.name, p.kind,
    SUM(CASE WHEN p.side = 'a' THEN p.ns / z.traces ELSE 0 END) AS a_ns,
    SUM(CASE WHEN p.side = 'b' THEN p.ns / z.traces ELSE 0 END) AS b_ns
  FROM on_path AS p
  JOIN sizes AS z ON z.side = p.side
  GROUP BY p.what, p.name, p.kind
)
SELECT
  what, name, kind,
  ROUND(a_ns / 1e6, 2) AS build_a_ms,
  ROUND(b_ns / 1e6, 2) AS build_b_ms,
  ROUND((b_ns - a_ns) / 1e6, 2) AS added_ms
FROM means
WHERE ROUND((b_ns - a_ns) / 1e6, 2) > 0
ORDER BY added_ms DESC, what, name, kind
