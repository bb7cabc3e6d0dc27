/**
 * Which surface of the HTTP server a path belongs to: the name refusals are counted under (audit
 * summary, Prometheus label). A fixed, short list: never the path itself.
 */
export type RequestSurface = 'api' | 'mcp' | 'metrics' | 'chat' | 'hooks' | 'docs' | 'other';

const under = (path: string, root: string) => path === root || path.startsWith(`${root}/`);

export function surfaceOf(path: string): RequestSurface {
  if (under(path, '/api')) return 'api';
  if (under(path, '/mcp')) return 'mcp';
  if (path === '/metrics') return 'metrics';
  if (under(path, '/chat')) return 'chat';
  if (under(path, '/hooks')) return 'hooks';
  if (under(path, '/docs') || path === '/openapi.json') return 'docs';
  return 'other';
}

/**
 * What a browser asks a host for by itself (a tab's icon, a crawler's rules, a home-screen icon):
 * no one tried to log in, so it is answered 404 without a token and is no auth failure.
 */
export function isBrowserProbe(path: string): boolean {
  return (
    path === '/favicon.ico' ||
    path === '/robots.txt' ||
    /^\/apple-touch-icon(-precomposed)?(-\d{1,4}x\d{1,4})?(-precomposed)?\.png$/.test(path)
  );
}
