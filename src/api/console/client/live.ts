import type { LiveView } from '../../../admin/live-view.js';
import { ago, cell, linkCell, mb, table, $ } from './dom.js';

/** The live view: berth's containers with memory and CPU from the engine, warm and pool counts, the bridges' health. */
export function renderLive(live: LiveView | null): void {
  if (!live) {
    $('live-counts').textContent = 'This berth process serves no live view.';
    return;
  }
  const c = live.counts;
  $('live-counts').textContent =
    `${live.containers_total} container(s) · ${c.warm} warm · ${c.pool} in the pool · ${c.in_flight} run(s) in flight · ${c.queued} queued` +
    (live.stats_missing ? ' · memory and CPU: not available (' + live.stats_missing + ')' : '');
  table(
    'containers',
    ['container', 'project', 'run', 'state', 'memory', 'CPU', 'pids'],
    live.containers.map((x) => [
      cell(x.id.slice(0, 12)),
      cell(x.project),
      x.run ? linkCell(x.run, 'run', x.project, x.run) : cell(x.workspace === 'pool' ? '(pool)' : '(warm)'),
      cell(x.state),
      cell(x.memory_bytes === null ? '—' : mb(x.memory_bytes) + (x.memory_limit_bytes ? ' / ' + mb(x.memory_limit_bytes) : '')),
      cell(x.cpu_percent === null ? '—' : x.cpu_percent + ' %'),
      cell(x.pids),
    ]),
    'No container of berth is on the engine.',
  );
  table(
    'bridges',
    ['bridge', 'connected', 'last event', 'failed (last hour)', 'waiting'],
    live.bridges.map((b) => [
      cell(b.name),
      cell(b.connected ? 'yes' : 'no', b.connected ? 'ok' : 'bad'),
      cell(b.last_event ? ago(b.last_event) : 'none yet'),
      cell(b.errors_last_hour, b.errors_last_hour ? 'bad' : 'ok'),
      cell(b.waiting),
    ]),
    'No chat bridge runs in this process.',
  );
}
