import type uPlot from 'uplot';
import type { ConsoleSeries } from '../state.js';
import { $ } from './dom.js';

type Pick = (s: ConsoleSeries) => Array<Array<number | null>>;
const CHARTS: Array<[string, string, Pick]> = [
  ['runs', 'Runs per minute', (s) => [s.runs]],
  ['latency', 'Run latency p50 / p95 (ms)', (s) => [s.p50_ms, s.p95_ms]],
  ['warm', 'Warm containers', (s) => [s.warm]],
  ['refusals', 'Refusals per minute', (s) => [s.refusals]],
];
const COLORS = ['#2d6cdf', '#d2542b'];
const charts: Record<string, uPlot> = {};

/** The last hour's four charts: made once, then given new data on each poll. */
export function renderCharts(series: ConsoleSeries): void {
  for (const [id, title, pick] of CHARTS) {
    const data = [series.minutes, ...pick(series)] as uPlot.AlignedData;
    const box = $('chart-' + id);
    const made = charts[id];
    if (made) {
      made.setData(data);
      continue;
    }
    if (!window.uPlot) {
      box.textContent = title + ': the chart library did not load';
      continue;
    }
    const width = Math.max(260, box.clientWidth || 300);
    const lines = pick(series).map((_, i) => ({
      label: id === 'latency' ? (i ? 'p95' : 'p50') : title,
      stroke: COLORS[i],
      width: 2,
      spanGaps: false,
      points: { show: true, size: 5 },
    }));
    charts[id] = new window.uPlot(
      { width, height: 160, series: [{}, ...lines], axes: [{}, { size: 56 }], legend: { show: id === 'latency' } },
      data,
      box,
    );
  }
}
