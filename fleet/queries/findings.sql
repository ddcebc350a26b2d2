-- The doctor's finding kinds across the fleet, per build: in how many traces each was
-- found, that share of the build's traces, and its estimated gain (median and total).
WITH per_build AS (
  SELECT COALESCE(build, '(none)') AS build, COUNT(*) AS traces
  FROM traces
  GROUP BY COALESCE(build, '(none)')
),
found AS (
  SELECT COALESCE(t.build, '(none)') AS build, f.trace_id, f.kind, f.gain_ns
  FROM finding AS f
  JOIN traces AS t ON t.trace_id = f.trace_id
)
SELECT
  found.build,
  found.kind,
  COUNT(DISTINCT found.trace_id) AS traces,
  ROUND(COUNT(DISTINCT found.trace_id) / MAX(per_build.traces), 3) AS share,
  ROUND(percentile_cont(0.5) WITHIN GROUP (ORDER BY found.gain_ns) / 1e6, 1) AS median_gain_ms,
  ROUND(SUM(found.gain_ns) / 1e6, 1) AS total_gain_ms
FROM found
JOIN per_build ON per_build.build = found.build
GROUP BY found.build, found.kind
ORDER BY found.build, traces DESC, found.kind
