import { describe, expect, it } from 'vitest';
import { chatPage } from '../../src/api/chat/page.js';
import { consolePage } from '../../src/api/console/page.js';
import { PAGES, pageBundle } from '../../src/api/page-bundle.js';

/**
 * The pages' own scripts and styles (src/api/<page>/client/) are bundled from source and served
 * at paths that name their content: the pages load them from there, nothing is inline, and the
 * CSP allows this origin's files only.
 */
describe('page bundles', () => {
  it.each(PAGES)('%s: one classic script (no module syntax left) and one stylesheet, named by their content', (page) => {
    const bundle = pageBundle(`/${page}/assets`, page);
    expect(bundle.script.path).toMatch(new RegExp(`^/${page}/assets/${page}-[0-9a-f]{12}\\.js$`));
    expect(bundle.style.path).toMatch(new RegExp(`^/${page}/assets/${page}-[0-9a-f]{12}\\.css$`));
    expect(bundle.script.contentType).toBe('text/javascript; charset=utf-8');
    expect(bundle.script.body).not.toMatch(/^\s*(import|export)\s/m);
    expect(bundle.style.body).toContain('box-sizing: border-box');
    // The same source gives the same names (a browser may keep them for good).
    expect(pageBundle(`/${page}/assets`, page).script.path).toBe(bundle.script.path);
  });

  it('the pages link their bundles and carry nothing inline; their CSP allows this origin only', () => {
    for (const { html, headers } of [chatPage('127.0.0.1:8080'), consolePage()]) {
      expect(html).not.toMatch(/<script>|<style>/);
      expect(html).toMatch(/<script src="\/(chat|console)\/assets\/(chat|console)-[0-9a-f]{12}\.js"><\/script>/);
      expect(html).toMatch(/<link rel="stylesheet" href="\/(chat|console)\/assets\/(chat|console)-[0-9a-f]{12}\.css">/);
      expect(headers['content-security-policy']).toContain("script-src 'self';");
      expect(headers['content-security-policy']).toContain("style-src 'self';");
      expect(headers['content-security-policy']).not.toMatch(/unsafe|sha256/);
    }
  });
});
