/**
 * Small multiples as one SVG file a browser or the README shows: one panel per series, sharing the
 * time axis, each scaled from 0 to its own maximum. Enough for a bench's plot; no dependency.
 */
export interface Series {
  title: string;
  unit: string;
  values: number[];
}

const W = 360;
const H = 150;
const PAD = { left: 52, right: 12, top: 26, bottom: 28 };
const COLS = 2;

const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c] as string);
const num = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));

function panel(s: Series, minutes: number[], x0: number, y0: number): string {
  const max = Math.max(...s.values, 0) * 1.1 || 1;
  const tEnd = Math.max(...minutes, 1);
  const px = (t: number) => x0 + PAD.left + (t / tEnd) * (W - PAD.left - PAD.right);
  const py = (v: number) => y0 + H - PAD.bottom - (v / max) * (H - PAD.top - PAD.bottom);
  const points = s.values.map((v, i) => `${px(minutes[i] ?? 0).toFixed(1)},${py(v).toFixed(1)}`).join(' ');
  const axisY = y0 + H - PAD.bottom;
  return [
    `<text x="${x0 + PAD.left}" y="${y0 + 16}" class="t">${esc(s.title)} (${esc(s.unit)})</text>`,
    `<line x1="${x0 + PAD.left}" y1="${axisY}" x2="${x0 + W - PAD.right}" y2="${axisY}" class="a"/>`,
    `<line x1="${x0 + PAD.left}" y1="${y0 + PAD.top}" x2="${x0 + PAD.left}" y2="${axisY}" class="a"/>`,
    `<text x="${x0 + PAD.left - 4}" y="${py(max / 1.1) + 4}" class="l" text-anchor="end">${num(max / 1.1)}</text>`,
    `<text x="${x0 + PAD.left - 4}" y="${axisY + 4}" class="l" text-anchor="end">0</text>`,
    `<text x="${x0 + PAD.left}" y="${axisY + 16}" class="l">0</text>`,
    `<text x="${x0 + W - PAD.right}" y="${axisY + 16}" class="l" text-anchor="end">${num(tEnd)} min</text>`,
    `<polyline points="${points}" class="p"/>`,
  ].join('\n');
}

/** title: its first line as the heading, further lines (\n) below it. */
export function smallMultiples(title: string, minutes: number[], series: Series[]): string {
  const rows = Math.ceil(series.length / COLS);
  const width = COLS * W;
  const heading = title.split('\n');
  const top = 12 + 18 * heading.length;
  const height = rows * H + top;
  const panels = series.map((s, i) => panel(s, minutes, (i % COLS) * W, top + Math.floor(i / COLS) * H));
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    '<style>.t{font-size:12px;fill:#222}.l{font-size:10px;fill:#555}.a{stroke:#999;stroke-width:1}.p{fill:none;stroke:#1f6feb;stroke-width:1.5}</style>',
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    ...heading.map((line, i) => `<text x="12" y="${20 + 18 * i}" font-size="${i === 0 ? 14 : 12}" fill="#111">${esc(line)}</text>`),
    ...panels,
    '</svg>',
    '',
  ].join('\n');
}
