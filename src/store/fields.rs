//! Reading the fields of a fixed-size slot's payload, front to back, little-endian: what the
//! data directory's small files of fixed slots (`refusals`, `answers`) hold. A field cut short
//! is None, never a panic.

/// What is left of a payload to read.
pub struct Fields<'a>(pub &'a [u8]);

impl<'a> Fields<'a> {
    pub fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    /// Bytes preceded by their length (a u16).
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// What is left.
    pub fn rest(&self) -> &'a [u8] {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_in_order_and_a_short_one_is_none() {
        let bytes = [
            7, 1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, b'h', b'i', 9,
        ];
        let mut f = Fields(&bytes);
        assert_eq!(f.u8(), Some(7));
        assert_eq!(f.u16(), Some(1));
        assert_eq!(f.u32(), Some(2));
        assert_eq!(f.u64(), Some(3));
        assert_eq!(f.bytes(), Some(&b"hi"[..]));
        assert_eq!(f.rest(), [9]);
        assert_eq!(f.u16(), None);
        assert_eq!(Fields(&[5, 0, b'a']).bytes(), None, "fewer bytes than said");
    }
}
