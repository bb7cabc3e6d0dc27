// uPlot, served beside the page (api/console/page.ts) as the global of its IIFE build.
import type uPlot from 'uplot';

declare global {
  interface Window {
    uPlot?: typeof uPlot;
  }
}
