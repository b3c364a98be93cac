// The class report's only script: sorting tables, ordering and filtering the heat map, opening a linked pair.
// It reads the page and nothing else (no fetch); without it every table and link still works.
"use strict";

function sortKey(row, column) {
  const cell = row.cells[column];
  const value = cell ? (cell.dataset.sort ?? cell.textContent.trim()) : "";
  const number = Number(value);
  return value !== "" && !Number.isNaN(number) ? number : value.toLowerCase();
}

function compare(a, b) {
  if (typeof a !== typeof b) return typeof a === "number" ? -1 : 1;  // numbers before text (blank, "not submitted")
  return a < b ? -1 : a > b ? 1 : 0;
}

function sortTable(th) {
  const table = th.closest("table");
  const column = Array.from(th.parentNode.children).indexOf(th);
  const ascending = th.getAttribute("aria-sort") !== "ascending";
  table.querySelectorAll("thead th").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  for (const body of table.tBodies) {  // a component's cases stay under its heading row
    const rows = Array.from(body.rows).filter((r) => !r.classList.contains("group"));
    rows.sort((a, b) => compare(sortKey(a, column), sortKey(b, column)) * (ascending ? 1 : -1));
    rows.forEach((r) => body.appendChild(r));
  }
}

function orderHeatmap(by) {
  const blocks = Array.from(document.querySelectorAll(".hblock"));
  const sizes = blocks.map((b) => b.querySelectorAll("a.hrow").length);
  const rows = Array.from(document.querySelectorAll("a.hrow"));
  rows.sort((a, b) => compare(by === "name" ? a.dataset.name : Number(a.dataset[by]),
                              by === "name" ? b.dataset.name : Number(b.dataset[by])));
  let i = 0;
  blocks.forEach((block, k) => rows.slice(i, i += sizes[k]).forEach((r) => block.appendChild(r)));
  document.querySelectorAll("[data-order]").forEach((b) => b.setAttribute("aria-pressed", b.dataset.order === by));
}

function filterHeatmap(text) {
  const wanted = text.trim().toLowerCase();
  document.querySelectorAll("a.hrow").forEach((r) => r.classList.toggle("dim", wanted !== "" && !r.dataset.key.includes(wanted)));
}

function openTarget() {
  const target = location.hash ? document.getElementById(decodeURIComponent(location.hash.slice(1))) : null;
  if (target && target.tagName === "DETAILS") target.open = true;
}

document.querySelectorAll("table.sortable thead th").forEach((th) => th.addEventListener("click", () => sortTable(th)));
document.querySelectorAll("[data-order]").forEach((b) => b.addEventListener("click", () => orderHeatmap(b.dataset.order)));
const filter = document.getElementById("filter");
if (filter) filter.addEventListener("input", () => filterHeatmap(filter.value));
window.addEventListener("hashchange", openTarget);
openTarget();
