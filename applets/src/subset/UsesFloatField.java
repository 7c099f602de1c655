public class UsesFloatField { static float f; }
