// main.js — builds the page once the data is parsed.

renderHeader();
renderSummary();
renderFilterBar();
const TIMELINE = new Timeline(document.getElementById('timeline-panel'));
buildTables();
document.body.setAttribute('data-ready', 'true');
