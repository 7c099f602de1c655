//! The generated stubs over unet channels (in progress).
