import { packageAsset, type PackageAsset } from '../package-assets.js';
import { pageBundle } from '../page-bundle.js';

/**
 * The console page: one HTML document, its script and style (client/, bundled by
 * ../page-bundle.ts) and uPlot (a small chart library) from its npm package, all served by berth
 * at paths that name their content, under a strict CSP. The script writes textContent only:
 * every name on the page (a tenant, a host, a session title) is someone else's text.
 */
export interface ConsoleAssets {
  uplot: PackageAsset;
  uplotCss: PackageAsset;
  script: PackageAsset;
  style: PackageAsset;
}
let assets: ConsoleAssets | undefined;
export function consoleAssets(): ConsoleAssets {
  return (assets ??= {
    uplot: packageAsset('/console/assets', 'uplot', 'uplot', './uPlot.iife.min.js', 'js'),
    uplotCss: packageAsset('/console/assets', 'uplot', 'uplot', './uPlot.min.css', 'css'),
    ...pageBundle('/console/assets', 'console'),
  });
}

const section = (id: string, title: string, body: string) =>
  `<section id="s-${id}" aria-labelledby="h-${id}"><h2 id="h-${id}">${title}</h2>${body}</section>`;

const BODY = `<header><h1>berth console</h1><nav aria-label="sections"><a href="#s-waiting">Waiting</a><a href="#s-live">Live</a><a href="#s-charts">Last hour</a><a href="#s-runs">Runs</a><a href="#s-projects">Projects</a><a href="#s-sessions">Sessions</a><a href="#s-models">Model use</a><a href="#s-audit">Audit log</a><a href="/docs">API</a></nav><span id="updated" role="status"></span><button id="signout" type="button">Sign out</button></header>
<main>
<div id="alert" role="alert"></div>
<section id="s-detail" aria-live="polite" hidden><a href="#" class="back">← back to the lists</a><div id="detail"></div></section>
${section('waiting', 'Waiting for you', '<h3>Requests to go past a grant</h3><div id="approvals"></div><h3>Strangers of the chat bots</h3><div id="senders"></div><h3>Frozen: a decoy credential was used</h3><div id="frozen"></div>')}
${section('charts', 'The last hour', '<div id="charts"><div class="chart"><h3>Runs per minute</h3><div id="chart-runs"></div></div><div class="chart"><h3>Run latency p50 / p95 (ms)</h3><div id="chart-latency"></div></div><div class="chart"><h3>Warm containers</h3><div id="chart-warm"></div></div><div class="chart"><h3>Refusals per minute</h3><div id="chart-refusals"></div></div></div>')}
${section('live', 'Live', '<p id="live-counts"></p><h3>Containers</h3><div id="containers"></div><h3>Chat bridges</h3><div id="bridges"></div>')}
${section('runs', 'Runs', '<h3>In flight</h3><div id="live"></div><h3>Recent</h3><div id="recent"></div><h3>Interrupted</h3><div id="interrupted"></div>')}
${section('projects', 'Projects', '<div id="projects"></div>')}
${section('sessions', 'Sessions <span id="sessions-count"></span>', '<div id="sessions"></div>')}
${section('models', 'Model use per tenant', '<div id="models"></div>')}
${section(
  'audit',
  'Audit log',
  '<form id="audit-form" class="filters"><label>since<select id="audit-since"><option value="1h">1 h</option><option value="10m">10 min</option><option value="24h">24 h</option><option value="7d">7 days</option><option value="">all</option></select></label><label>kind<select id="audit-kind"><option value="">any</option><option>admin</option><option>auth_failure</option><option>permission_denied</option><option>sandbox_violation</option><option>run_receipt</option></select></label><label>actor<input id="audit-actor" placeholder="operator, tenant:…"></label><label>project<input id="audit-project"></label><button type="submit">Filter</button></form><div id="audit"></div>',
)}
</main>`;

export function consolePage(): { html: string; headers: Record<string, string> } {
  const { uplot, uplotCss, script, style } = consoleAssets();
  return {
    html: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth console</title><link rel="stylesheet" href="${uplotCss.path}"><link rel="stylesheet" href="${style.path}"></head>\n<body>${BODY}<script src="${uplot.path}"></script><script src="${script.path}"></script></body></html>`,
    headers: {
      // uPlot sizes its parts through the CSSOM (element.style), which style-src does not govern.
      'content-security-policy': `default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  };
}
