//! `OutputFile`: writes to a temporary file next to the destination and renames it into
//! place only when complete, so a failed command never leaves a truncated model behind.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A destination being written; dropping it uncommitted removes the temporary file.
pub(crate) struct OutputFile {
    path: PathBuf,
    temp: PathBuf,
    committed: bool,
}

impl OutputFile {
    /// Creates `PATH.partial` next to `path` and a buffered writer over it.
    pub(crate) fn create(path: &Path) -> anyhow::Result<(OutputFile, BufWriter<File>)> {
        let mut temp = path.as_os_str().to_owned();
        temp.push(".partial");
        let temp = PathBuf::from(temp);
        let file = File::create(&temp).with_context(|| format!("creating {}", temp.display()))?;
        let guard = OutputFile {
            path: path.to_path_buf(),
            temp,
            committed: false,
        };
        Ok((guard, BufWriter::with_capacity(1 << 20, file)))
    }

    /// Flushes `writer`, syncs, and renames the file into place; returns its size.
    pub(crate) fn commit(mut self, writer: BufWriter<File>) -> anyhow::Result<u64> {
        let context = || format!("writing {}", self.temp.display());
        let file = writer
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(context)?;
        file.sync_all().with_context(context)?;
        let size = file.metadata().with_context(context)?.len();
        std::fs::rename(&self.temp, &self.path).with_context(|| {
            format!(
                "renaming {} to {}",
                self.temp.display(),
                self.path.display()
            )
        })?;
        self.committed = true;
        Ok(size)
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
