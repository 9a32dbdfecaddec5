/** The console page's one DOM lookup: an element the page must have (a missing one is a bug in the page). */
export const $ = <T extends HTMLElement>(selector: string): T => {
  const node = document.querySelector<T>(selector);
  if (!node) throw new Error(`console page lacks ${selector}`);
  return node;
};
