// Tables read as stacked cards on a phone (style.css): each cell shows its
// column's name from data-label. Templates set data-label; this fills it
// in from the table's header for any cell that has none (served as a file:
// the CSP allows no inline script).
for (const table of document.querySelectorAll("main table")) {
  const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => {
      if (!cell.hasAttribute("data-label") && heads[i] && heads[i] !== "Actions") cell.dataset.label = heads[i];
    });
  }
}
