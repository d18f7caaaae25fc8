// Copy buttons: a button with data-copy="<id>" copies that element's text.
// Served as a file (no inline script), so the page's CSP needs no exception;
// without JavaScript the button stays hidden and the text can be selected.
for (const button of document.querySelectorAll("button[data-copy]")) {
  const source = document.getElementById(button.dataset.copy);
  const status = document.getElementById("copy-status");
  if (!source || !navigator.clipboard) continue;
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(source.textContent);
      if (status) status.textContent = "Copied.";
    } catch {
      if (status) status.textContent = "Copying failed: select the text and copy it.";
    }
  });
}
