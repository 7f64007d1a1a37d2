//! A writer of `newc` cpio archives, the format the Linux kernel unpacks an initramfs from
//! (`Documentation/driver-api/early-userspace/buffer-format.rst`). Only what an initramfs
//! needs: directories, regular files, symbolic links and device nodes, owned by root.

use std::io::{self, Write};

/// File type bits of `st_mode`.
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Writes a `newc` archive entry by entry; [`CpioWriter::finish`] writes the trailer.
pub(crate) struct CpioWriter<W: Write> {
    out: W,
    written: u64,
    next_ino: u32,
}

impl<W: Write> CpioWriter<W> {
    /// An archive written to `out`.
    pub(crate) fn new(out: W) -> CpioWriter<W> {
        CpioWriter {
            out,
            written: 0,
            next_ino: 1,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0u8; 3][..n])
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> io::Result<()> {
        let name = name.trim_start_matches('/');
        if name.is_empty() || name.contains('\0') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad archive entry name {name:?}"),
            ));
        }
        let ino = if name == "TRAILER!!!" {
            0
        } else {
            self.next_ino += 1;
            self.next_ino
        };
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let fields = [
            ino,
            mode,
            0, // uid
            0, // gid
            nlink,
            0, // mtime: fixed, so the same inputs give the same archive
            u32::try_from(data.len()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("{name} is over 4 GiB"))
            })?,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        let mut header = String::with_capacity(110);
        header.push_str("070701");
        for f in fields {
            header.push_str(&format!("{f:08x}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    /// A directory.
    pub(crate) fn dir(&mut self, name: &str, perm: u32) -> io::Result<()> {
        self.entry(name, S_IFDIR | (perm & 0o7777), (0, 0), &[])
    }

    /// A regular file with `data`.
    pub(crate) fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, S_IFREG | (perm & 0o7777), (0, 0), data)
    }

    /// A symbolic link to `target`.
    pub(crate) fn symlink(&mut self, name: &str, target: &str) -> io::Result<()> {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes())
    }

    /// A character device node.
    pub(crate) fn char_device(
        &mut self,
        name: &str,
        perm: u32,
        major: u32,
        minor: u32,
    ) -> io::Result<()> {
        self.entry(name, S_IFCHR | (perm & 0o7777), (major, minor), &[])
    }

    /// Writes the trailer and returns the output.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, (0, 0), &[])?;
        // The kernel reads archives in 512-byte blocks; pad like cpio(1) does.
        let n = (512 - (self.written % 512) as usize) % 512;
        self.put(&vec![0u8; n])?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads back (name, mode, rdev major, data) of every entry.
    fn parse(mut b: &[u8]) -> Vec<(String, u32, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut off = 0usize;
        let align = |x: usize| (x + 3) & !3;
        loop {
            assert_eq!(&b[..6], b"070701", "magic at offset {off}");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&b[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap()
            };
            let (mode, size, major, namesize) = (field(1), field(6), field(9), field(11));
            let name = std::str::from_utf8(&b[110..110 + namesize as usize - 1])
                .unwrap()
                .to_string();
            let data_at = align(110 + namesize as usize);
            let data = b[data_at..data_at + size as usize].to_vec();
            let next = align(data_at + size as usize);
            off += next;
            b = &b[next..];
            if name == "TRAILER!!!" {
                assert!(b.iter().all(|&x| x == 0));
                assert_eq!((off + b.len()) % 512, 0);
                return out;
            }
            out.push((name, mode, major, data));
        }
    }

    #[test]
    fn entries_read_back() {
        let mut w = CpioWriter::new(Vec::new());
        w.dir("/bin", 0o755).unwrap();
        w.file("bin/busybox", 0o755, b"\x7fELF...").unwrap();
        w.symlink("bin/sh", "busybox").unwrap();
        w.char_device("dev/console", 0o600, 5, 1).unwrap();
        w.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        let bytes = w.finish().unwrap();
        let e = parse(&bytes);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            ["bin", "bin/busybox", "bin/sh", "dev/console", "init"]
        );
        assert_eq!(e[0].1, S_IFDIR | 0o755);
        assert_eq!(e[1].3, b"\x7fELF...");
        assert_eq!(e[2].1 & S_IFLNK, S_IFLNK);
        assert_eq!(e[2].3, b"busybox");
        assert_eq!((e[3].1 & 0o170000, e[3].2), (S_IFCHR, 5));
        assert_eq!(e[4].3, b"#!/bin/sh\n");
    }

    #[test]
    fn bad_names_are_refused() {
        let mut w = CpioWriter::new(Vec::new());
        assert!(w.file("/", 0o644, b"").is_err());
        assert!(w.file("a\0b", 0o644, b"").is_err());
    }
}
