// The admin's and the tender form's only script. Without it every page still works.
// 1. A form marked data-once disables its buttons when it is submitted, so a double click
//    sends one request (the server refuses a second one anyway); data-confirm asks first.
// 2. The week page's lifecycle diagram is drawn by the vendored mermaid.js, if loaded, when
//    its folded section is first opened (mermaid cannot lay out a hidden diagram).
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-once")) return;
  if (form.dataset.sent === "1") { event.preventDefault(); return; }
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) { event.preventDefault(); return; }
  form.dataset.sent = "1";
  // disabled after this event, so the click that submits still counts
  window.setTimeout(function () {
    form.querySelectorAll("button, input[type=submit]").forEach(function (b) {
      b.disabled = true;
      b.setAttribute("aria-busy", "true");
    });
  }, 0);
}, true);

function drawDiagram() {
  window.mermaid.run({ querySelector: "pre.mermaid" }).then(function () {
    document.body.dataset.diagram = "drawn";
  }, function (error) {
    document.body.dataset.diagram = "failed";
    console.error(error);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  if (!(window.mermaid && document.querySelector("pre.mermaid"))) return;
  // at once, so that mermaid's own start-on-load draws nothing while it is folded; the
  // spacing keeps apart the labels of two opposite edges between the same states
  // (close/reopen, approve/un-approve), which overlap at mermaid's defaults
  window.mermaid.initialize({
    startOnLoad: false, securityLevel: "strict", theme: "neutral",
    state: { nodeSpacing: 160, rankSpacing: 100, padding: 12 }
  });
  var folded = document.getElementById("lifecycle");
  if (!folded || folded.open) { drawDiagram(); return; }
  folded.addEventListener("toggle", function first() {
    if (!folded.open) return;
    folded.removeEventListener("toggle", first);
    drawDiagram();
  });
});

// a page restored from the back-forward cache shows its forms usable again
window.addEventListener("pageshow", function (event) {
  if (!event.persisted) return;
  document.querySelectorAll("form[data-once]").forEach(function (form) {
    delete form.dataset.sent;
    form.querySelectorAll("button, input[type=submit]").forEach(function (b) {
      b.disabled = false;
      b.removeAttribute("aria-busy");
    });
  });
});
